"""Host helpers under other projects' names, so their programs port by changing imports."""
