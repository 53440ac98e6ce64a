"""Reports: flat rows from the store, printed as Rich tables or exported."""
