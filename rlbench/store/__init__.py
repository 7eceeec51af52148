"""The checkpoint format: the zip of arrays and its manifest (checkpoint), the manifest's checks (schema),
and the host state it carries beside the learner's (host_state). It knows nothing of runs or loops."""
