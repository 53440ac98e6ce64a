"""Discovery: the GPU classes a pool offers. This version knows the local machine."""
