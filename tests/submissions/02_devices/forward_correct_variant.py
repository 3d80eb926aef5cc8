# solution: forward-on
# fails:
# says:
# Correct, written differently: no_grad as a decorator, eval() and to() in separate statements.
@torch.no_grad()
def forward_on(model, x, device):
    device = torch.device(device)
    model.eval()
    model.to(device)
    x = x.to(device, non_blocking=True)
    return model(x)
