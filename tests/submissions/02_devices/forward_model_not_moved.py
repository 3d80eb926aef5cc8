# solution: forward-on
# fails: forward-on-any-device
# says: model.to(device)
# Typical mistake: the input is moved but the model is not.
def forward_on(model, x, device):
    model.eval()
    with torch.no_grad():
        return model(x.to(device))
