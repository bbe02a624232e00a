"""Graph passes: pure functions over an IndexedGraph."""
