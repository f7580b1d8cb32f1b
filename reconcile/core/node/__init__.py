"""The node's behaviour: what the machine-config daemon does to a node whose rendered config
changes, and so whether a change needs a new image at all (docs/rollout.md, "Changes a node takes
live"). Not the image's content: the image is made in imagebuild/; this is what a node does with a
config, ported from the MCO's `pkg/daemon`. Pure.

- `disruption`: the daemon's own rule: a rendered config's diff and the actions it takes for it
  (`Action`: a reboot, a service reloaded or restarted, nothing), with or without the cluster's
  node disruption policies;
- `livechange`: the verdict for a pool (`LiveVerdict`): the nodes take the change live on the image
  they run, or a build is due; and the policies in force (`Policy`).

The settings key `liveChanges` (`apply`, `rebuild`) is read with the other settings
(imagebuild/settings.py); the decision that uses the verdict is core/decision.py."""
