# QEMU devices for aarch64-softmmu: the virt board (with its SMMUv3) and the PLDMA engine model.
CONFIG_ARM_VIRT=y
CONFIG_PCIE_PORT=y
CONFIG_EXANEST_PLDMA=y
