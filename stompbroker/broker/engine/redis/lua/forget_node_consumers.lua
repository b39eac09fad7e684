-- KEYS: registry, mode hash, groups hash. ARGV: node.
-- FORGET_NODE_FUNCTION.
--- @include "forget_node"
return forget_node(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
