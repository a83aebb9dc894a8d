"""donor-game: cultural evolution of cooperation in the donor game (Vallinder and Hughes 2024)."""
