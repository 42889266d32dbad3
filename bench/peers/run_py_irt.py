"""py-irt: variational Bayesian 2PL (``IrtModelTrainer`` with ``IrtConfig(model_type="2pl")``, default 2,000 epochs)."""

import time

import numpy as np
import pandas as pd
import peer_io
from py_irt.config import IrtConfig
from py_irt.dataset import Dataset
from py_irt.training import IrtModelTrainer

Y, out = peer_io.load()
started = time.perf_counter()
columns = [f"q{j}" for j in range(Y.shape[1])]
frame = pd.DataFrame(Y.astype(float), columns=columns)
frame.insert(0, "model", [f"m{i}" for i in range(Y.shape[0])])
dataset = Dataset.from_pandas(frame, subject_column="model", item_columns=columns)
trainer = IrtModelTrainer(data_path=None, config=IrtConfig(model_type="2pl", seed=0), dataset=dataset, verbose=False)
trainer.train(device="cpu")
params = trainer.best_params
subject_pos = {name: k for k, name in params["subject_ids"].items()}
item_pos = {name: k for k, name in params["item_ids"].items()}
ability = np.asarray(params["ability"])[[subject_pos[f"m{i}"] for i in range(Y.shape[0])]]
diff = np.asarray(params["diff"])[[item_pos[c] for c in columns]]
peer_io.save(out, ability, diff, started, method="SVI 2PL, 2000 epochs, lr 0.1 (package defaults)")
