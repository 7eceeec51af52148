"""DQN (Mnih et al. 2015) and QR-DQN (Dabney et al. 2018) as SB3, SB3-contrib and SBX define them."""
