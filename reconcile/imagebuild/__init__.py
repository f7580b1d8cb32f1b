"""What a build is made of: settings, build inputs, registry auth, templates, the encoded
MachineConfig, the builders. Pure (templates are read from the package)."""
