"""Every NVDLA in-memory data format as a public API: numpy arrays in, bytes out, and back.

One implementation of each layout of the data-format document, for INT8, INT16 and FP16
(element types from `nvdla_sim.datatype`), used by the compiler, the units and the tests:

  feature cubes       pack_feature / unpack_feature / FeatureLayout, *_batch (BATCH_STRIDE),
                      read_cube / write_cube (whole atoms in an address space)
  pitch-linear pixels pack_pixels / unpack_pixels / cdma_values, PIXEL_FORMATS (all 36)
  direct weights      pack_direct_weights / unpack_direct_weights / direct_weight_offsets
  image weights       pack_image_weights / unpack_image_weights (pre- and 2/4-line post-extension)
  Winograd weights    pack_winograd_weights / unpack_winograd_weights, winograd_transform
                      (G g G^T, scale), winograd_channel_extend (strides), winograd_inverse
  sparse compression  compress_weights / decompress_weights (WMB, WGS, compressed surfaces)
  SDP operands        pack_bias / pack_prelu / pack_batchnorm / pack_elementwise,
                      pack_per_channel / pack_per_element and their unpack_* (1 or 2 bytes,
                      1 or 2 components)
  alignment           check_alignment / ALIGNMENT (the document's alignment table)

`pack_*` functions return uint8 arrays (the bytes from the data's start address) and refuse
a layout the alignment table forbids (or values the element type cannot hold) with a one-line
`NvdlaSimError`; `unpack_*` read such bytes back.  docs/formats.md has an example.
"""
from .alignment import ALIGNMENT, Alignment, check_alignment
from .compression import CompressedWeights, compress_weights, decompress_weights
from .feature import (ATOM_BYTES, FeatureLayout, byte_offsets, pack_feature, pack_feature_batch,
                      pack_feature_layout, read_cube, surfaces, unpack_feature,
                      unpack_feature_batch, write_cube)
from .pixel import (PIXEL_FORMAT_BY_CODE, PIXEL_FORMATS, PixelFormat, PixelImage, cdma_values,
                    pack_pixels, pixel_format, unpack_pixels)
from .sdp_operands import (elements_per_atom, pack_batchnorm, pack_bias, pack_elementwise,
                           pack_per_channel, pack_per_element, pack_prelu, unpack_per_channel,
                           unpack_per_element)
from .weights import (ATOMIC_C, ATOMIC_K, G, WEIGHT_ALIGN_BYTES, WinogradWeights,
                      direct_weight_offsets, kernel_group, pack_direct_weights,
                      pack_image_weights, pack_winograd_weights, pre_extend, pre_extend_inverse,
                      unpack_direct_weights, unpack_image_weights, unpack_winograd_weights,
                      winograd_channel_extend, winograd_channel_unextend, winograd_channels,
                      winograd_inverse, winograd_max_scale, winograd_offsets, winograd_transform)

__all__ = [name for name in dir() if not name.startswith("_")]
