"""The platform a pool's image is built for: the OS stream it builds on and its nodes' CPU
architecture, read from the cluster at most once a run. Pure.

- `osstream`: the pool's OS stream (`OSStream`: the base and extensions images);
- `architecture`: the architecture of the pool's nodes, as the MCO assigns nodes to pools;
- `clusterfacts`: both, read once a run (`ClusterFacts`), and which pools take them fresh.

Today a pool has one architecture and one build. Multi-architecture builds (a later issue) start
here: where a pool's one architecture becomes one per architecture its nodes run
(`architecture.of_pool`, `clusterfacts.arch`); one build object is then made per architecture
where core/desired.py `objects` makes the pool's one (its `node_selector`, from `inputs.arch`),
and the image's index (one manifest list over the architectures' digests) is assembled where a
build's success becomes the pool's image (core/actions/buildrows.py `succeed`)."""
