# solution: fast-step
# fails: fast-step-results
# says: steps a torch.optim.Adam, not an AdamW
# Typical mistake: fused Adam for fused AdamW: the fused check passes, and the weight decay is lost.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
