# solution: estimate-memory
# fails: estimate-memory-parameters estimate-memory-dtype estimate-memory-gradients estimate-memory-adam
# says: write it yourself
def training_memory(model, dtype):
    """Calls the course's own estimate: the numbers are right, but it earns nothing here."""
    est = mem.estimate_anatomy(model, dtype=dtype, optimizer="adam")
    return {"parameters": est.parameters, "gradients": est.gradients, "adam_state": est.optimizer_state}
