# solution: forward-on
# fails: forward-on-eval
# says: model.eval()
# Typical mistake: the model stays in training mode, so dropout is on during inference.
def forward_on(model, x, device):
    model = model.to(device)
    with torch.no_grad():
        return model(x.to(device))
