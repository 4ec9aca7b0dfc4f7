VALUE = "extra"
