"""Everything about the image a pool builds, one folder a concept. Pure (templates are read from
the package).

- what a build is made of, here: `settings` (the settings ConfigMaps), `buildinputs` (labelled
  inputs), `auth` and `proxy`, `imageref`, `containersconf` (registries.conf and policy.json from
  the MachineConfig), `imagecontent` (the content digest of a rendered config), `templates`,
  `encoding` (the encoded MachineConfig), `dockerlint`;
- `platform/`: what it is built for: the OS stream and the nodes' architecture (and where
  multi-architecture builds will start);
- `builders/`: who builds it: one module a builder behind the `Builder` protocol of `base`, and
  how a build's end is read (`outofdisk`: out of disk space);
- `signing/`: signing it: keys, the signing Pod, the check of an image's signatures.

What a node does with a new config is not here: core/node/. Build storage (the volume, the disk
figures) is core/storage/."""
