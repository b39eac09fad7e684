"""
The destination features beyond plain topics and queues.

Scheduled delivery: the messages and their due times (``schedule_rules``)
and the one timer that fires them (``schedule_timer``); retained messages: a
topic's last value (``retain_rules``) and how a SEND's ``retain`` is applied
(``retaining``); queue browsers (``browsing``); JMS selectors: the language
(``selectors``) and how routing applies them (``selecting``).

This ``__init__`` imports nothing, so that a module of the room loads alone.
"""
