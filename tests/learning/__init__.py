"""Learning thresholds (marked slow): the learners must actually learn."""
