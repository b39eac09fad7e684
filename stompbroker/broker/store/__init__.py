"""
The message store: where persistent messages and durable subscriptions live between
SEND and ACK.

``base`` holds the interface every store keeps, its records and its errors;
``memory`` and ``sqlite`` are the two stores of the in-process engine.  Imports
Twisted (stores answer with Deferreds) but nothing above the broker layer.
"""
