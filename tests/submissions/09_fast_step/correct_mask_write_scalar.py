# solution: fast-step
# fails: 
# says: 
# Correct, written differently: NaN inputs zeroed with x[x.isnan()] = 0.0 each step; a number written through a
# mask is masked_fill_ on a GPU, which reads nothing on the host.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        x = x.clone()
        x[x.isnan()] = 0.0
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).tolist()
