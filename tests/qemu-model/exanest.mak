# QEMU devices for aarch64-softmmu: the virt board (with its SMMUv3) and the PLDMA engine model.
CONFIG_ARM_VIRT=y
CONFIG_PCIE_PORT=y
CONFIG_EXANEST_PLDMA=y
# The QFDB under emulation: the MMU-500 (SMMUv2) and the engine on the platform bus.
CONFIG_ARM_MMU500=y
# The second NIC of multi-node runs (Open MPI's launcher, the TCP baseline) and the disk with the
# guests' Debian user space (libfabric, Open MPI): Documentation/libfabric.rst.
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_NET=y
CONFIG_VIRTIO_BLK=y
