"""Reading what comes from outside (host files, specs, locks): bounded in size and depth."""
