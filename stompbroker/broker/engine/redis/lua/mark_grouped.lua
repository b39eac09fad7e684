-- KEYS: the queue's mode hash, its stream. Marks the queue grouped.
--- @include "mark_grouped"

mark_grouped(KEYS[1], KEYS[2])
return 0
