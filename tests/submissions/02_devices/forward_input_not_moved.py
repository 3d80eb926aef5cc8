# solution: forward-on
# fails: forward-on-any-device forward-on-no-parameters
# says: move the input
# Typical mistake: the model is moved but the input is not.
def forward_on(model, x, device):
    model.to(device).eval()
    with torch.no_grad():
        return model(x)
