"""
Sorting, filtering and paging of the API's lists (:mod:`stompbroker.web.api_paging`),
as RabbitMQ's management API does them: the pure logic, then through the API on
destinations and connections.
"""

from __future__ import annotations

import pytest

from stompbroker.web.api_guard import ApiError
from stompbroker.web.api_paging import ListQuery, list_answer
from tests.support.api import Api
from tests.support.broker import FakeConnection

ROWS = [{"destination": f"/queue/q{number:02}", "depth": number % 7} for number in range(25)]


def parse(**query: str) -> ListQuery:
    return ListQuery.parse(query.get)


def test_a_page_says_where_it_is_in_the_list() -> None:
    """page=2 of 10: the rows 11 to 20, with the counts RabbitMQ gives."""
    answer = list_answer(ROWS, parse(page="2", page_size="10"), "destination")
    assert [row["destination"] for row in answer["items"]] == [
        f"/queue/q{number:02}" for number in range(10, 20)
    ]
    assert {key: value for key, value in answer.items() if key != "items"} == {
        "page": 2,
        "page_size": 10,
        "page_count": 3,
        "item_count": 10,
        "filtered_count": 25,
        "total_count": 25,
    }


def test_name_filters_ignoring_case_and_sort_orders_the_whole_list_before_paging() -> None:
    """The filter runs before the sort, the sort before the page: page 1 has the deepest."""
    answer = list_answer(
        ROWS,
        parse(page="1", page_size="3", name="Q1", sort="depth", sort_reverse="true"),
        "destination",
    )
    assert answer["filtered_count"] == 10
    assert [row["depth"] for row in answer["items"]] == [6, 5, 5]
    regex = list_answer(ROWS, parse(name="q2[34]$", use_regex="true"), "destination")
    assert [row["destination"] for row in regex] == ["/queue/q23", "/queue/q24"]


def test_without_page_the_list_is_answered_whole() -> None:
    """No page: a list, as before paging existed (the CLI and scripts read it so)."""
    assert list_answer(ROWS, parse(), "destination") == ROWS
    assert list_answer([], parse(page="1"), "destination")["page_count"] == 1


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ({"page": "0"}, "page must be a whole number 1 or more"),
        ({"page": "x"}, "page must be"),
        ({"page": "1", "page_size": "501"}, "page_size must be a whole number from 1 to 500"),
        ({"page": "4", "page_size": "10"}, "page 4 is past the last, 3"),
        ({"sort": "colour"}, "no field 'colour' to sort on"),
        ({"name": "(", "use_regex": "true"}, "name is not a regular expression"),
    ],
)
def test_bad_paging_is_a_400_naming_the_parameter(query: dict[str, str], detail: str) -> None:
    with pytest.raises(ApiError) as raised:
        list_answer(ROWS, ListQuery.parse(query.get), "destination")
    assert raised.value.code == 400
    assert detail in str(raised.value.document()["detail"])


def test_the_api_pages_destinations_and_connections() -> None:
    """/api/destinations and /api/connections take ?page=&page_size=&name=&sort=."""
    api = Api()
    for number in range(5):
        api.broker.publish(f"/queue/paged.{number}", b"x" * number)
    code, answer, _ = api.call("GET", "destinations?page=1&page_size=2&name=paged&sort=destination")
    assert code == 200
    assert [row["destination"] for row in answer["items"]] == ["/queue/paged.0", "/queue/paged.1"]
    assert answer["filtered_count"] == 5 and answer["page_count"] == 3
    for name in ("c1", "c2", "c3"):
        api.broker.open_connection(FakeConnection(name))
    code, answer, _ = api.call("GET", "connections?page=1&page_size=2&sort=id&sort_reverse=true")
    assert [row["id"] for row in answer["items"]] == ["c3", "c2"]
    code, error, _ = api.call("GET", "connections?page=9")
    assert (code, error["error"]) == (400, "bad request")
