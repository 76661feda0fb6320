"""Two distillation losses that exist only for the tests: loaded as a
pytest plugin (``-p toy_losses``) they are registered before the contract
tests are collected, as a third-party loss would be. They read something
mmlvit does not record (each block's output, after the residuals), so the
plugin also adds that probe."""

import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from mmlvit.models.distillers import PROBES, Probe
from mmlvit.models.losses import BlockwiseDistillLoss

# (B, N, C): the output of ``backbone.layers.{i}``.
PROBES['block_outputs'] = Probe(
    lambda model, i, role: model.backbone.layers[i],
    lambda args, kwargs, output: output,
)


@MODELS.register_module(force=True)
class BlockOutputMSE(BlockwiseDistillLoss):
    """Mean over blocks of the MSE between block outputs. Arguments as
    :class:`BlockwiseDistillLoss`."""

    records = ('block_outputs',)
    log_name = 'block_out_mse'

    def block_mses(self, student, teacher):
        blocks = self.block_indices(student.depth)
        return blocks, torch.stack(
            [
                F.mse_loss(
                    *self.match_tokens(
                        student.block_outputs[i],
                        teacher.block_outputs[i],
                        student.num_extra_tokens,
                        teacher.num_extra_tokens,
                    )
                )
                for i in blocks
            ]
        )

    def forward(self, student, teacher):
        blocks, per_block = self.block_mses(student, teacher)
        logs = {
            f'{self.log_name}.{i}': v.detach()
            for i, v in zip(blocks, per_block)
        }
        return self.loss_weight * per_block.mean(), logs


@MODELS.register_module(force=True)
class UnweightedBlockOutputMSE(BlockOutputMSE):
    """Breaks the contract: ignores ``loss_weight``."""

    def forward(self, student, teacher):
        _, per_block = self.block_mses(student, teacher)
        return per_block.mean(), {}


def pytest_configure(config):
    """Nothing to configure: importing this plugin registered the losses
    and the probe."""
