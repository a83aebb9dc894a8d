"""A posted-price market of firms and consumers with Sybil sellers (after Agent Bazaar, Karten et al. 2026)."""
