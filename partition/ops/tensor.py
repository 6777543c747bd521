DEFS = []
