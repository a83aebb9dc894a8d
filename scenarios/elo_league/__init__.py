"""Elo league: population-based self-play with Elo matchmaking (Pommerman-style league)."""
