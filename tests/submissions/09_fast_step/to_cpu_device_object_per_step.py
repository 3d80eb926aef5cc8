# solution: fast-step
# fails: fast-step-no-syncs
# says: blocking copy to the host
# Typical mistake: each loss copied with .to(torch.device("cpu")) in the loop: a blocking device-to-host copy per
# step on a GPU.
def fast_step(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    losses = []
    for i, (x, y) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().to(torch.device("cpu")))
    return torch.stack(losses).tolist()
