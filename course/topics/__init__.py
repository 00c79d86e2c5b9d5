"""The course's topics, each an exercise spec for the shared check machinery plus its references and data."""
