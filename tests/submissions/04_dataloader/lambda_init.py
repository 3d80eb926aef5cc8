# solution: seed-numpy-worker
# fails: worker-init-spawn
# says: lambda
seed_numpy_worker = lambda worker_id: setattr(get_worker_info().dataset, "rng",
                                              np.random.default_rng(get_worker_info().seed))
