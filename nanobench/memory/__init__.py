"""Memory traced, not guessed: live tensor bytes of a real forward, and the traced decode workspace."""
