"""Layer 6, boundary: inputs in from presets, files and overrides;
other tools' formats out.

  inputs   a preset name, a JSON file or dict, and --override, to the
           four inputs, checked with one sentence per problem
  export   a run's design as TorchRec's inputs and sharding plan
  torchrec_import  a TorchRec model and cluster in, as the four inputs
  torchrec_bridge  TorchRec's own objects of an export, planned and
           priced by TorchRec (needs TorchRec's CPU build)
  fuzzing  the input boundary and the model at scale, fuzzed
  doc_numbers  the figures README.md and WORKSPACE.md quote from runs,
           with the commands that regenerate them

Imports: core, spec, model, search, calibration.
"""
