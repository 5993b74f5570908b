"""Writes the PyTorch-exported models next to this file (``torch_cnn.onnx``: a ResNet-style
CNN with batch norm and a residual add; ``torch_encoder.onnx``: a 2-layer transformer
encoder; ``torch_lstm.onnx``: an LSTM and a dense head), each with a dynamic batch dim, as
``torch.onnx.export`` (TorchScript exporter, opset 17) writes them. PyTorch is not a
dependency: run this in a separate environment with torch and onnx installed
(``python tests/data/onnx/export_from_torch.py``). ``tests/test_onnx_torch_models.py``
imports the files."""
import os

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)
class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1); self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1); self.b2 = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d(1); self.fc = nn.Linear(16, 10)
    def forward(self, x):
        h = torch.relu(self.b1(self.c1(x)))
        h = torch.relu(h + self.b2(self.c2(h)))
        h = torch.max_pool2d(h, 2)
        return self.fc(self.pool(h).view(h.size(0), -1))
enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2)
class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__(); self.lstm = nn.LSTM(8, 16, batch_first=True); self.fc = nn.Linear(16, 3)
    def forward(self, x):
        y, (h, c) = self.lstm(x); return self.fc(y[:, -1])
for name, model, x in (("cnn", CNN(), torch.randn(2, 3, 16, 16)), ("encoder", enc, torch.randn(2, 5, 32)), ("lstm", LSTMNet(), torch.randn(2, 7, 8))):
    model.eval()
    try:
        torch.onnx.export(model, (x,), os.path.join(HERE, f"torch_{name}.onnx"), input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, dynamo=False)
        print(name, "ok")
    except Exception as e:
        print(name, "FAILED", type(e).__name__, str(e)[:300])
