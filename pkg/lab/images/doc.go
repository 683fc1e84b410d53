// Package images builds the OCI images a lab's kubelet+containerd nodes run,
// keeps them in an OCI image layout on disk and serves that layout as a
// registry the nodes' containerd pull from through a hosts.toml mirror.
//
// Images are built without Docker: a directory (for example a debootstrap
// rootfs) becomes the base layer, a few host files (static binaries) the
// second one, and everything that could differ between two builds of the
// same inputs (mtimes, owner names, the creation time) is fixed, so the same
// inputs always give the same manifest digest.
//
// The lab uses it in three steps: Store.Ensure for each image it builds
// (cheap when nothing changed), NewRegistry over the store served on an
// address the nodes reach, and WriteHostsDir for each node's containerd
// registry config_path. LoadTarball adds saved images, as `kind load` does;
// pushes to the registry work too.
package images
