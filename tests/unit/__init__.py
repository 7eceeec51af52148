"""Pure unit tests: hand-computed values, equivalences, trace counts; no env process, seconds each."""
