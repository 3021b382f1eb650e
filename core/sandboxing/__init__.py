"""Where actions run: the bubblewrap sandbox and its in-sandbox server, sandbox pools, workspaces,
environments, and the tools and approval hooks that act on them."""
