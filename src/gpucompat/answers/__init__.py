"""Questions answered in seconds without a sweep: explain (a stack on a GPU and driver), advise (what to install), doctor (this machine)."""
