//! GlusterFS: glusterd started by hand, a replica-2 volume, two client mounts.
