VALUE = "base"
