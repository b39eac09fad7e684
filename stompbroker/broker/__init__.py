"""The broker: destinations, subscriptions, queues and the message store, behind one ``Service``."""
