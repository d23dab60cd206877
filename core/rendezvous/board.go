package rendezvous

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// OpenBoard opens this user's tenant board in the run directory
// (preload/c/tenant.h), creating it empty (mode 0600) when it is
// missing: the file tenants.EUID, which must be a regular file of the
// effective uid with no access for others and one link (a symlink, a
// file of another uid or a hard link to somewhere else is refused). The
// caller owns the descriptor (close-on-exec) and lays the board out
// (core/direct, PrepareBoard). Another process of the user may write
// anything into it; the C side only ever reads it with pread.
func (n *Node) OpenBoard() (int, error) {
	name := fmt.Sprintf("tenants.%d", n.euid)
	fd := -1
	err := n.withRunDir(true, func(dirfd int) error {
		var err error
		fd, err = unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("tenant board %s: %w", name, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	switch {
	case err != nil:
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("not a regular file (mode %o)", st.Mode)
	case st.Uid != n.euid:
		err = fmt.Errorf("owned by uid %d, not %d", st.Uid, n.euid)
	case st.Mode&0o077 != 0:
		err = fmt.Errorf("mode %04o, want 0600", st.Mode&0o7777)
	case st.Nlink != 1:
		err = fmt.Errorf("%d links, want 1", st.Nlink)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("tenant board %s: %w", name, err)
	}
	return fd, nil
}
