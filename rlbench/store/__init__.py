"""The checkpoint format: the zip of arrays (checkpoint, members), its manifest as a typed record (manifest),
checked before it is trusted (schema, expectations), the learner state's bytes (learner_state) and the host
state it carries beside them (host_state). It knows nothing of runs or loops."""
