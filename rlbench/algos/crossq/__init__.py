"""CrossQ (Bhatt, Palenicek et al., ICLR 2024, arXiv:1902.05605): SAC without target networks,
with BatchRenorm in actor and critic and one joint critic pass over (s, a) and (s', a')."""
