# solution: forward-on
# fails:
# says:
# Correct, written differently: eval for the call only, the caller's training mode restored after.
def forward_on(model, x, device):
    was_training = model.training
    model.to(device)
    model.eval()
    try:
        with torch.no_grad():
            out = model(x.to(device))
    finally:
        model.train(was_training)
    return out
