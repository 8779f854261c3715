"""The WB seller API: endpoint descriptors, token parsing and the rate-limited client."""
