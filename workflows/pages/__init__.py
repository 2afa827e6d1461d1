"""The workflow pages: the list, the editor's canvas, a diff of two versions, the history.

Pages only: the canvas script reads and changes workflows through /api/v1 with the
browser's session (workflows/api/), like any other client.
"""
